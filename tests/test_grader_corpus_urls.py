"""grader/corpus/urls.py: the URL corpus, its classes, and the kit's check_url against it."""
import unittest

from grader.corpus import DEFAULT_SEED, urls
from outbox.core.sender import check_url

TRAP, CLOSED = 40001, 40002


def kit(url):
    try:
        return check_url(url)[1]
    except ValueError:
        return "refused"


class UrlCorpusTest(unittest.TestCase):
    def test_the_kits_url_rule_refuses_and_takes_exactly_what_the_rule_does(self):
        for seed in (DEFAULT_SEED, 7):
            for case in urls.cases(seed):
                url = urls.url_of(case, TRAP, CLOSED)
                want = urls.reference_outcome(url)
                self.assertEqual(kit(url), "refused" if want["kind"] == "raised" else want["port"], (seed, case))

    def test_a_refused_url_names_the_trap_and_a_taken_one_never_does(self):
        for case in urls.cases(DEFAULT_SEED):
            url = urls.url_of(case, TRAP, CLOSED)
            if urls.reference_outcome(url)["kind"] == "tries":
                self.assertNotIn(str(TRAP), url)
            else:
                self.assertNotIn(str(CLOSED), url or "")

    def test_the_spellings_the_classes_name_are_there(self):
        by_class = {}
        for case in urls.cases(DEFAULT_SEED):
            by_class.setdefault(case.cls, []).append(urls.url_of(case, TRAP, CLOSED))
        self.assertIn("http://[0:0:0:0:0:0:0:1]:%d/events" % TRAP, by_class["ipv6-spelling"])
        self.assertIn("http://127.0.0.1:01/events", by_class["port-leading-zero"])
        self.assertIn("http://127.0.0.1:%d/events " % TRAP, by_class["whitespace"])
        self.assertIn("http://127.0.0.1:\u0668\u0660/events", by_class["port-non-ascii-digit"])
        self.assertIn("http://127.0.0.1.nip.io:%d/events" % TRAP, by_class["host-prefix"])
        self.assertIn("http://LOCALHOST:%d/events" % CLOSED, by_class["localhost-case"])
        self.assertEqual({urls.reference_outcome(u)["kind"] for u in by_class["ipv4-loopback"]}, {"tries"})


if __name__ == "__main__":
    unittest.main()
