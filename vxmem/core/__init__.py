"""What every layer stands on: the reserved keys, time, argument checks, tokens, progress, errors
and the names a package hands on lazily.

Nothing here imports another vxmem package.
"""
