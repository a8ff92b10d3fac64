"""tests/all_pythons.py --share: the CPythons between the oldest and the newest split the suite, none left out."""
import unittest

from tests import all_pythons


def info(implementation, version):
    return implementation, version, "%d.%d.0" % version, "3.40.1"


class ShareTest(unittest.TestCase):
    INFOS = {
        "py27": info("CPython", (2, 7)), "py38": info("CPython", (3, 8)), "py39": info("CPython", (3, 9)),
        "py310": info("CPython", (3, 10)), "py312": info("CPython", (3, 12)), "py313": info("CPython", (3, 13)),
        "pypy": info("PyPy", (3, 9)), "broken": None,
    }

    def test_only_the_versions_between_the_oldest_and_the_newest_take_a_share(self):
        shared = all_pythons.shares(list(self.INFOS), self.INFOS)
        self.assertEqual(shared, {"py39": (0, 3), "py310": (1, 3), "py312": (2, 3)})

    def test_the_shares_hold_every_module_of_the_suite_once(self):
        modules = all_pythons.suite_modules()
        self.assertIn("tests.test_all_pythons", modules)
        self.assertEqual(len(set(modules)), len(modules))
        parts = [modules[at::3] for at in range(3)]
        self.assertEqual(sorted(sum(parts, [])), sorted(modules))
        self.assertTrue(all(parts), parts)

    def test_two_versions_or_fewer_share_nothing(self):
        infos = {"py38": info("CPython", (3, 8)), "py313": info("CPython", (3, 13)), "pypy": info("PyPy", (3, 9))}
        self.assertEqual(all_pythons.shares(list(infos), infos), {})


if __name__ == "__main__":
    unittest.main()
