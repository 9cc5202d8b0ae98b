"""Prints the verdict and ends the process on import: only its own process ends.
expect-text: your code ended its process (exit code 0)
expect-text: your code printed: exercise 10: PASSED
"""

import os

print("exercise 10: PASSED")
os._exit(0)
