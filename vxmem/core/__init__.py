"""What every layer stands on: the reserved keys and sentinels, time, argument checks, options
declared once, tokens, progress, errors and the names a package hands on lazily.

Nothing here imports another vxmem package.
"""
