"""The families behind `candle_py.nn.functional` (their public face); they import one another one way, never nn's layer modules."""
