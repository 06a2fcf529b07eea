"""The plain collection: documents, metadata and vectors, durable and filterable.

It never imports the memory layer: a memory collection is a collection whose documents
carry reserved ``_vx_*`` metadata keys (:mod:`vxmem.core.keys`), and every verb here works on
it unchanged.
"""

from ..core.errors import DatabaseLockedError, ForkedHandleError, InvalidDatabaseError, ReadOnlyError, VectrixError
from .arguments import SEARCH_MODES
from .collection import Collection
from .results import Result, Results

__all__ = ["Collection", "Result", "Results", "SEARCH_MODES", "VectrixError", "DatabaseLockedError",
           "InvalidDatabaseError", "ReadOnlyError", "ForkedHandleError"]
