"""What ``import kvstash`` loads: the core alone, standard library only (no torch, numpy or engine), and the names
the connectors and tests import from ``kvstash.client``."""

import json
import os
import subprocess
import sys
import unittest

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAVY = ("torch", "numpy", "vllm", "sglang", "transformers", "kvstash.vllm", "kvstash.sglang")


def _modules_after(statement):
    """The modules loaded after ``statement`` in a fresh interpreter that imports the package from this tree."""
    code = "import sys, json\n%s\nprint(json.dumps(sorted(sys.modules)))" % statement
    env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=PACKAGE_ROOT, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


class ImportTest(unittest.TestCase):

    def test_should_import_neither_torch_nor_numpy_nor_an_engine_with_kvstash(self):
        loaded = _modules_after("import kvstash")
        heavy = [m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(("kvstash.vllm", "kvstash.sglang"))]
        self.assertEqual(heavy, [], "import kvstash loaded these")
        self.assertIn("kvstash.client", loaded)

    def test_should_leave_the_tensor_state_unloaded_until_a_tensor_call(self):
        loaded = _modules_after("import kvstash\nkvstash.PagedKV, kvstash.TensorTransfer, kvstash.PinInfo")
        self.assertNotIn("torch", loaded)

    def test_should_keep_the_names_imported_from_kvstash_client(self):
        loaded = _modules_after("from kvstash.client import Client, Response, connect, default_directory, pieces, "
                                "range_chunks")
        self.assertNotIn("torch", loaded)

    def test_should_ship_its_type_marker(self):
        self.assertTrue(os.path.isfile(os.path.join(PACKAGE_ROOT, "kvstash", "py.typed")))


if __name__ == "__main__":
    unittest.main()
