"""Prints the verdict and ends the process on import: only its own process ends.
expect-text: your code ended its process (exit code 0)
"""

import os

print("exercise 12: PASSED")
os._exit(0)
