"""Adapters to other ecosystems, each behind an extra and imported only by name.

:mod:`vxmem.integrations.langchain` (``pip install "vxmem[langchain]"``): a LangChain retriever
and chat message history over a :class:`~vxmem.Vectrix`. Nothing here is imported by ``import
vxmem``: a module loads its ecosystem's package when it is itself imported.
"""
