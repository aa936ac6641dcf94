"""The test suite.

Metrics of a run — this process and the worker processes it starts, which inherit the
environment — go to a directory of the run's own (`app.metrics`), set before the app is
imported and removed when the run ends.
"""

import atexit
import os
import shutil
import tempfile

os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="memory-test-metrics-")
atexit.register(shutil.rmtree, os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)
