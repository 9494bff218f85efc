"""Request types, statuses, dtypes and layouts as a user meets them: names when printed, errors that name the
bad value and what is accepted."""

import unittest

from support import CLIENT_ROOT  # noqa: F401  (puts the package on the path)

from kvstash import Dtype, Layout, RequestType, Status


class TypesTest(unittest.TestCase):
    def test_should_print_statuses_and_types_by_name(self):
        self.assertEqual(str(Status.OK), "OK")
        self.assertEqual("%s" % Status.NO_SPACE, "NO_SPACE")
        self.assertEqual(f"{RequestType.LOOKUP}", "LOOKUP")
        self.assertEqual(str(Dtype.BFLOAT16), "bfloat16")
        self.assertEqual(Status.OK, 0)                              # still the wire code where a number is used

    def test_should_name_an_unknown_dtype_and_the_accepted_ones(self):
        for bad in ("int7", 99):
            with self.assertRaises(ValueError) as caught:
                Dtype.of(bad)
            self.assertIn(repr(bad), str(caught.exception))
            self.assertIn("bfloat16", str(caught.exception))
        with self.assertRaisesRegex(ValueError, "'int7'"):
            Layout("m", dtype="int7")

    def test_should_check_a_replaced_layout_like_a_new_one(self):
        layout = Layout("m", layers=2, hidden=64)
        changed = layout._replace(dtype="bfloat16", layers="4")
        self.assertIs(changed.dtype, Dtype.BFLOAT16)
        self.assertEqual(changed.layers, 4)
        self.assertEqual(changed.chunk_bytes(16), 2 * 4 * 16 * 64 * 2)
        with self.assertRaisesRegex(ValueError, "layers must be an integer, not 'x'"):
            layout._replace(layers="x")
        with self.assertRaisesRegex(ValueError, "'int7'"):
            layout._replace(dtype="int7")


if __name__ == "__main__":
    unittest.main()
