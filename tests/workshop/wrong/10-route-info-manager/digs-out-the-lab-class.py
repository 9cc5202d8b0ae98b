"""The lab's manager found through the garbage collector: using it raises the refusal.
expect-fail: test_registration_fills_every_table
"""

import gc

RouteInfoManager = next(c for c in gc.get_objects() if isinstance(c, type) and c.__name__ == "RouteInfoManager")
