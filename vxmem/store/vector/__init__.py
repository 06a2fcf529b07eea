"""Dense search: the mirror's vectors, the exact scan, and the usearch HNSW cache over them."""
