"""pytest set-up for the torch.distributed backend's tests.

The tests need the ``tidegate`` package installed into this interpreter's environment
(``./run.sh test`` does it). A missing package is an error, not a skip: a skipped suite would
hide a broken build.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The workers live next to the tests; spawned ranks find them through sys.path.
if HERE not in sys.path:
    sys.path.insert(0, HERE)

try:
    import tidegate.torch  # noqa: F401
except ImportError as error:  # pragma: no cover - the message is the point
    raise ImportError(
        "the tidegate package is not installed in this environment: run ./run.sh test, or "
        "pip install --no-build-isolation ./integrations/pytorch"
    ) from error
