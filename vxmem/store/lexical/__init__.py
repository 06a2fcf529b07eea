"""Lexical search: BM25 in numpy over FTS5's postings, and FTS5 itself."""
