"""FTS5's BM25, scored in numpy over the FTS5 index's postings held in memory.

SQLite's FTS5 evaluates ``bm25()`` for every document that matches any query word (about
1 µs each) and cannot stop early, so a lexical recall over 100k memories whose words follow
Zipf's law took 34 ms. :class:`LexicalIndex` keeps the FTS5 index's postings (term ->
rowids and term frequencies, read through ``fts5vocab`` and tokenised by FTS5 itself, so the
terms are FTS5's own) as numpy arrays and computes the very same score, with FTS5's formula
and constants, term at a time over whole posting arrays. Documents added since the last
search, and those FTS5 does not hold yet, are tokenised in one batch by a TEMP FTS5 table
with the same tokenizer. A query word that FTS5 splits into several tokens (a phrase) is
left to FTS5 itself (see :class:`~vxmem.store.lexical.search.LexicalSearch`). The postings are
saved beside the database at a writer's close, and taken from that file at the next open
when it agrees with FTS5. :class:`BM25AsOf` gives the statistics of the collection as it
stood at a past moment.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ...core.keys import NO_KIND
from ..mirror import snapshot
from ..mirror.mirror import Mirror
from ..mirror.rowids import RowidMap
from ..sqlite.files import snapshot_read
from ..sqlite.jsonio import dumps_strings, loads_strings
from .fts import TOKENIZE

K1, B = 1.2, 0.75  # FTS5's bm25() constants


class Postings:
    """One term's postings: the first ``n`` of ``rowids`` (ascending) and of ``tf`` (the
    term's frequency in each of those documents)."""

    __slots__ = ("rowids", "tf", "n")

    def __init__(self, room: int = 4) -> None:
        self.rowids = np.zeros(max(room, 4), dtype=np.int64)  # room for a first fill of known size
        self.tf = np.zeros(max(room, 4), dtype=np.float64)
        self.n = 0

    @classmethod
    def of(cls, rowids: np.ndarray, tf: np.ndarray) -> Postings:
        """Postings over these arrays (views are fine: a first extend copies them)."""
        got = cls.__new__(cls)
        got.rowids, got.tf, got.n = rowids, tf, rowids.size
        return got

    def extend(self, rowids: np.ndarray, tf: np.ndarray) -> None:
        need = self.n + len(rowids)
        if need > len(self.rowids):
            cap = max(need, 2 * len(self.rowids))
            self.rowids = np.resize(self.rowids, cap)
            self.tf = np.resize(self.tf, cap)
        self.rowids[self.n:need] = rowids
        self.tf[self.n:need] = tf
        self.n = need


class LexicalIndex:
    """Postings of the text column of ``vx_fts``, kept in step with the mirror lazily.

    ``saved`` names a file (see :meth:`save`) the first read takes the postings from
    instead of FTS5, when it is this database's (``uid``) and agrees with FTS5's
    tokens on a sample of documents; the rest are read after it. ``indexed_upto()`` is the
    rowid FTS5 holds every document up to, as the current transaction sees it (None: all
    of them); the documents above it are tokenised, not read from FTS5.

    ``postings`` maps each term to its :class:`Postings`; ``text_len`` (a
    :class:`~vxmem.store.mirror.rowids.RowidMap`) holds, by rowid, the tokens of each
    document's text column; ``ready`` says whether they were read yet.
    ``last_scores`` gives the BM25 of any position for the last :meth:`search`.
    """

    def __init__(self, conn: sqlite3.Connection, saved: str | None = None, uid: str | None = None,
                 indexed_upto: Callable[[], int | None] | None = None):
        self._conn = conn
        self._saved, self._uid = saved, uid
        self._indexed_upto = indexed_upto
        self.saved_upto = -1  # the last rowid the saved file holds, when this index read or wrote it
        self.postings: dict[str, Postings] = {}
        self.text_len = RowidMap(0)  # by rowid: tokens in the text column
        self._upto = 0  # every rowid <= this has been read
        self._ready = False
        self._temp = False
        self._word_cache: dict[str, tuple[str, ...]] = {}
        self._df_key: Any = None
        self._df: dict[str, int] = {}
        self.last_scores = _Lookup(np.zeros(0, dtype=np.int64), np.zeros(0))

    @property
    def ready(self) -> bool:
        """Whether the postings were read (from the saved file or FTS5)."""
        return self._ready

    # ------------------------------------------------------------------ reading FTS5

    def _ensure_temp(self) -> None:
        if not self._temp:
            c = self._conn
            c.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.vx_tok USING fts5(text, tokenize='{TOKENIZE}')")
            c.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.vx_tok_i USING fts5vocab(temp, vx_tok, 'instance')")
            c.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.vx_fts_i USING fts5vocab(main, vx_fts, 'instance')")
            self._temp = True

    def tokenize(self, texts: Iterable[tuple[int, str]]) -> list[tuple[str, int]]:
        """(term, id) for every token FTS5's tokenizer makes of each (id, text), in order."""
        self._ensure_temp()
        c = self._conn
        c.executemany("INSERT INTO temp.vx_tok (rowid, text) VALUES (?, ?)", texts)
        try:
            return c.execute("SELECT term, doc FROM temp.vx_tok_i ORDER BY doc, offset").fetchall()
        finally:
            c.execute("DELETE FROM temp.vx_tok")

    def add_tokens(self, pairs: list[tuple[str, int]]) -> None:
        """Fold (term, rowid) token pairs into the postings."""
        if not pairs:
            return
        terms = np.array([t for t, _ in pairs], dtype=object)
        rowids = np.fromiter((r for _, r in pairs), dtype=np.int64, count=len(pairs))
        self.text_len.add(rowids)
        order = np.lexsort((rowids, terms))
        terms, rowids = terms[order], rowids[order]
        # Runs of equal (term, rowid) give the term frequency.
        new_run = np.ones(len(terms), dtype=bool)
        new_run[1:] = (terms[1:] != terms[:-1]) | (rowids[1:] != rowids[:-1])
        starts = np.flatnonzero(new_run)
        tf = np.diff(np.append(starts, len(terms))).astype(np.float64)
        run_terms, run_rowids = terms[starts], rowids[starts]
        term_start = np.flatnonzero(np.append(True, run_terms[1:] != run_terms[:-1]))
        bounds = np.append(term_start, len(run_terms))
        for i, s in enumerate(term_start):
            e = bounds[i + 1]
            p = self.postings.get(run_terms[s])
            if p is None:
                p = self.postings[run_terms[s]] = Postings()
            p.extend(run_rowids[s:e], tf[s:e])

    def _add_grouped(self, rows: list[tuple[str, str]]) -> None:
        """Fold (term, its rowids comma-joined, one per occurrence) into empty postings: the
        first read, one row per term instead of one per token (5x faster at 100k documents)."""
        parts = []
        for term, joined in rows:
            rowids = np.fromstring(joined, dtype=np.int64, sep=",")  # text mode: parses, 8x faster than split
            if rowids.size > 1 and np.any(rowids[1:] < rowids[:-1]):
                rowids.sort(kind="stable")
            starts = np.flatnonzero(np.r_[True, rowids[1:] != rowids[:-1]])
            p = self.postings.get(term)
            if p is None:
                p = self.postings[term] = Postings(starts.size)
            p.extend(rowids[starts], np.diff(np.r_[starts, rowids.size]).astype(np.float64))
            parts.append(rowids)
        if parts:
            self.text_len.add(np.concatenate(parts))

    def sync(self, max_rowid: int, texts_after: Callable[[int], Iterable[tuple[int, str]]],
             sample: Callable[[int], list[tuple[int, str]]] | None = None, saved_only: bool = False) -> bool:
        """Read what FTS5 holds up to ``max_rowid``: all of it the first time (from the saved
        file when it is good: ``sample(upto)`` gives a few documents it must agree with),
        then only the documents added since (``texts_after(rowid)`` yields their (rowid, text)).
        ``saved_only``: the first time, read nothing unless the saved file is good. Whether
        the index now holds every document up to ``max_rowid``."""
        if max_rowid <= self._upto:
            return True
        if not self._ready and self._take_saved(sample):
            self._ready = True
            if max_rowid <= self._upto:
                return True
        if not self._ready and saved_only:
            self._saved = None  # not good: the first search reads FTS5 without trying it again
            return False
        if not self._ready:
            self._ensure_temp()
            # Only up to max_rowid: on a read-only handle FTS5 may already hold rows its
            # mirror has not taken in yet, and those are tokenised when it does. And only up
            # to what FTS5 holds (read in the same transaction): the rest are tokenised below.
            with snapshot_read(self._conn):
                held = None if self._indexed_upto is None else self._indexed_upto()
                upto = max_rowid if held is None else min(max_rowid, held)
                rows = self._conn.execute("SELECT term, group_concat(doc) FROM temp.vx_fts_i "
                                          "WHERE col = 'text' AND doc <= ? GROUP BY term", (upto,)).fetchall()
            self._add_grouped(rows)
            self._upto, self._ready = upto, True
        if max_rowid > self._upto:
            self.add_tokens(self.tokenize(texts_after(self._upto)))
        self._upto = max_rowid
        return True

    # ------------------------------------------------------------------ the saved file

    def save(self, path: str, slack: int = 0) -> None:
        """Save the postings read so far to ``path`` (a :mod:`~vxmem.store.mirror.snapshot` file),
        unless nothing was read or the file holds them but for fewer than ``slack`` rowids."""
        if not self._ready or self._uid is None or self._upto == self.saved_upto \
                or 0 <= self.saved_upto < self._upto < self.saved_upto + slack:
            return
        terms = list(self.postings)
        lists = list(self.postings.values())
        at = np.r_[0, np.cumsum([p.n for p in lists], dtype=np.int64)]
        rowids = np.concatenate([p.rowids[: p.n] for p in lists]) if lists else np.zeros(0, dtype=np.int64)
        tf = np.concatenate([p.tf[: p.n] for p in lists]) if lists else np.zeros(0)
        snapshot.write(path, {"uid": self._uid, "upto": self._upto, "tokenize": TOKENIZE},
                       {"terms": np.frombuffer(dumps_strings(terms), dtype=np.uint8), "at": at, "rowids": rowids,
                        "tf": tf, "text_len": self.text_len.to_array(self._upto + 1)})
        self.saved_upto = self._upto

    def _take_saved(self, sample: Callable[[int], list[tuple[int, str]]] | None) -> bool:
        """Take the postings from the saved file; False (nothing taken) unless it is good."""
        if self._saved is None or self._uid is None or sample is None:
            return False
        got = snapshot.read(self._saved)
        if got is None:
            return False
        fields, a = got
        upto = fields.get("upto")
        if fields.get("uid") != self._uid or fields.get("tokenize") != TOKENIZE or type(upto) is not int:
            return False
        try:
            terms = loads_strings(a["terms"].data)
            at, rowids, tf, text_len = a["at"], a["rowids"], a["tf"], a["text_len"]
            if (at.shape != (len(terms) + 1,) or at.dtype != np.int64 or rowids.dtype != np.int64
                    or tf.dtype != np.float64 or text_len.dtype != np.int64 or at[-1] != rowids.size
                    or tf.size != rowids.size or text_len.size != upto + 1 or np.any(at[1:] < at[:-1])):
                return False
        except (KeyError, ValueError, TypeError):
            return False
        bounds = at.tolist()
        postings = {t: Postings.of(rowids[bounds[i]:bounds[i + 1]], tf[bounds[i]:bounds[i + 1]])
                    for i, t in enumerate(terms)}
        if not self._agrees(postings, text_len, sample(upto)):
            return False
        self.postings, self.text_len, self._upto = postings, RowidMap.of_array(text_len, 0), upto
        self.saved_upto = upto
        return True

    def _agrees(self, postings: dict[str, Postings], text_len: np.ndarray, docs: list[tuple[int, str]]) -> bool:
        """Whether saved postings hold exactly FTS5's tokens of ``docs`` ((rowid, text))."""
        counts: dict[tuple[str, int], int] = {}
        for term, rowid in self.tokenize(docs):
            counts[term, rowid] = counts.get((term, rowid), 0) + 1
        lengths: dict[int, int] = {}
        for (term, rowid), tf in counts.items():
            lengths[rowid] = lengths.get(rowid, 0) + tf
            p = postings.get(term)
            if p is None:
                return False
            i = int(np.searchsorted(p.rowids[: p.n], rowid))
            if i >= p.n or p.rowids[i] != rowid or p.tf[i] != tf:
                return False
        return all(rowid < text_len.size and text_len[rowid] == lengths.get(rowid, 0) for rowid, _ in docs)

    # ------------------------------------------------------------------ scoring

    def doc_lengths(self, rowid: np.ndarray, live: np.ndarray, scope_tokens: np.ndarray,
                    n_rows: int) -> tuple[np.ndarray, float]:
        """Each position's length as FTS5 counts it (text tokens plus its scope token) and
        the average over the ``n_rows`` live documents: those at positions ``live``, whose
        rowids ``rowid`` gives by position. ``scope_tokens`` is 1 for a memory, 0 for a plain
        document."""
        doc_len = np.array(scope_tokens, dtype=np.float64)
        doc_len[live] += self.text_len.get(rowid[live])
        return doc_len, float(doc_len.sum()) / max(n_rows, 1)

    def phrases(self, words: list[str]) -> list[str] | None:
        """Each query word as FTS5's tokenizer makes it (cached); None if one is a phrase."""
        cache = self._word_cache
        missing = [w for w in words if w not in cache]
        if missing:
            if len(cache) > 50_000:
                cache.clear()
            per_word: dict[int, list[str]] = {i: [] for i in range(len(missing))}
            for term, i in self.tokenize(enumerate(missing)):
                per_word[i].append(term)
            for i, w in enumerate(missing):
                cache[w] = tuple(per_word[i])
        out: list[str] = []
        for w in words:
            toks = cache[w]
            if len(toks) > 1:
                return None
            out.extend(toks)  # a word of no tokens (FTS5 drops it) adds nothing
        return out

    def search(self, words: list[str], pos_of_rowid: RowidMap, allowed: np.ndarray, doc_len: np.ndarray,
               avgdl: float, n_rows: int, k: int, df_key: Any = None,
               df_of: Callable[[str, np.ndarray], int] | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """Top ``k`` positions among ``allowed`` by FTS5's bm25 (text column weight 1), best first.

        ``pos_of_rowid`` maps rowids to mirror positions (-1: deleted); ``doc_len`` and
        ``avgdl`` come from :meth:`doc_lengths`; ``df_key`` names the data's version, so
        document frequencies are counted once per version. ``df_of(term, positions of its
        postings)`` counts a term's documents instead, when the statistics are those of
        another corpus than every live document (``n_rows`` and ``avgdl`` must be its own
        too: see :class:`BM25AsOf`). None when a word is a phrase.
        """
        if not words or n_rows == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        phrases = self.phrases(words)
        if phrases is None:
            return None
        if self._df_key != df_key:
            self._df_key, self._df = df_key, {}
        hits, parts = self._contributions(phrases, pos_of_rowid, allowed, doc_len, avgdl, n_rows, df_of)
        cand, s = _summed(hits, parts, allowed.shape[0])
        self.last_scores = _Lookup(cand, s)  # BM25 of any position (0: no match), for hybrid
        return _top(cand, s, k)

    def _contributions(self, terms: list[str], pos_of_rowid: RowidMap, allowed: np.ndarray, doc_len: np.ndarray,
                       avgdl: float, n_rows: int, df_of: Callable[[str, np.ndarray], int] | None,
                       ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """For each term with postings: the allowed positions holding it, and its share of
        their BM25 (FTS5's formula), in the order of ``terms`` (see :meth:`search`)."""
        allowed_ext = np.append(allowed, False)  # position -1 (deleted) reads the extra False
        hits: list[np.ndarray] = []
        parts: list[np.ndarray] = []
        for term in terms:
            p = self.postings.get(term)
            if p is None:
                continue
            pos = pos_of_rowid.get(p.rowids[: p.n], ascending=True)  # postings are in rowid order
            if df_of is not None:
                n_hit = df_of(term, pos)
            else:  # documents holding the term: changes only with writes
                cached = self._df.get(term)
                n_hit = self._df[term] = int(np.count_nonzero(pos >= 0)) if cached is None else cached
            idf = math.log((n_rows - n_hit + 0.5) / (n_hit + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            ok = allowed_ext[pos]
            q = pos[ok]
            f = p.tf[: p.n][ok]
            hits.append(q)
            parts.append(idf * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * doc_len[q] / avgdl))))
        return hits, parts


def _summed(hits: list[np.ndarray], parts: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every position some term hit, ascending, and the sum of its terms' shares (``n``:
    the positions there are)."""
    every = np.concatenate(hits) if hits else np.zeros(0, dtype=np.int64)
    contrib = np.concatenate(parts) if parts else np.zeros(0)
    cand: np.ndarray
    s: np.ndarray
    if every.size * 8 < n:  # few matches (one session's): no arrays the size of the collection
        cand, inv = np.unique(every, return_inverse=True)
        s = np.bincount(inv, weights=contrib, minlength=cand.size)  # adds in phrase order
    else:
        score = np.zeros(n)
        for q, c in zip(hits, parts):
            score[q] += c
        hit = np.zeros(n, dtype=bool)
        hit[every] = True
        cand = np.flatnonzero(hit)
        s = score[cand]
    return cand, s


def _top(cand: np.ndarray, s: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of ``cand`` by score ``s``, best first (a tie to the lower position)."""
    if cand.size > k:
        part = np.argpartition(-s, k - 1)[:k]
        edge = s[part].min()
        part = np.union1d(part[s[part] > edge], np.flatnonzero(s == edge))
        cand, s = cand[part], s[part]
    order = np.lexsort((cand, -s))[:k]
    return cand[order], s[order]


class BM25AsOf:
    """BM25's statistics as of any moment, for one data version: the documents that existed
    then are the live ones created at or before it (a document that is no memory always
    counts). The first moment asked is counted directly; from the second on, creation
    moments sorted once (with cumulative lengths, and per term those of its postings) make
    each statistic a binary search. Lengths are whole token counts, so every way of adding
    them gives the same average."""

    def __init__(self, m: Mirror, doc_len: np.ndarray, key: Any):
        n = m.n
        self.key = key
        created = np.where(m.kind[:n] != NO_KIND, m.ts[:n], -np.inf)
        self.created = np.where(m.alive[:n], created, np.inf)  # by position; a dead one never counts
        self.doc_len = doc_len[:n]
        self.asked = 0
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None
        self._terms: dict[str, np.ndarray] = {}

    def stats(self, as_of: float) -> tuple[int, float]:
        """How many documents existed at ``as_of``, and their average length."""
        self.asked += 1
        if self.asked == 1:
            ok = self.created <= as_of
            n_rows, total = int(np.count_nonzero(ok)), float(self.doc_len[ok].sum())
        else:
            if self._sorted is None:
                order = np.argsort(self.created, kind="stable")
                self._sorted = (self.created[order], np.concatenate(([0.0], np.cumsum(self.doc_len[order]))))
            created, cum = self._sorted
            n_rows = int(np.searchsorted(created, as_of, side="right"))
            total = float(cum[n_rows])
        return n_rows, total / max(n_rows, 1)

    def df(self, term: str, pos: np.ndarray, as_of: float) -> int:
        """How many of a term's postings (as positions, -1: deleted) existed at ``as_of``."""
        if self.asked <= 1:
            return int(np.count_nonzero(self.created[pos[pos >= 0]] <= as_of))
        got = self._terms.get(term)
        if got is None:
            got = self._terms[term] = np.sort(self.created[pos[pos >= 0]])
        return int(np.searchsorted(got, as_of, side="right"))


class _Lookup:
    """Scores of sorted positions, called with positions (0 for any other)."""

    def __init__(self, positions: np.ndarray, scores: np.ndarray):
        self.positions, self.scores = positions, scores

    def __call__(self, ps: np.ndarray) -> np.ndarray:
        ps = np.asarray(ps, dtype=np.int64)
        if self.positions.size == 0:
            return np.zeros(ps.shape)
        idx = np.minimum(np.searchsorted(self.positions, ps), self.positions.size - 1)
        return np.where(self.positions[idx] == ps, self.scores[idx], 0.0)

