"""What every layer stands on: the reserved keys, time, argument checks, tokens, progress and errors.

Nothing here imports another vxmem package.
"""
