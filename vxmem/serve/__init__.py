"""vxmem over the wire: a REST API (``vxmem serve``) and an MCP server (``vxmem mcp``).

Both serve the spec's verbs through :class:`~vxmem.aio.AsyncVectrix`, one user's scope per
request (:mod:`vxmem.serve.service`), with the request and response models of
:mod:`vxmem.serve.schemas`. Importing this package loads nothing: FastAPI, uvicorn and the MCP
SDK (the ``server`` extra) load with the module that needs them.
"""
