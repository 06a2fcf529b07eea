"""Models from installed wheels: the files, the onnxruntime runner, embedders, rerankers and their cache.

Importing this package loads no model and no runtime; each loads on first use.
"""
