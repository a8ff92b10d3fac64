"""validate_event: the one set of rules for an event."""
import unittest

from outbox import InvalidEvent, validate_event
from outbox.core.event import QUOTE_CHARS, canonical, digest, loads_strict, show
from outbox.core.sender import check_url


class ValidateEventTest(unittest.TestCase):
    def test_returns_a_new_dict_with_exactly_the_three_keys(self):
        event = {"qty": 7, "sku": "snack", "id": "snack-7"}
        out = validate_event(event)
        self.assertEqual(out, {"id": "snack-7", "sku": "snack", "qty": 7})
        self.assertIsNot(out, event)
        out["id"] = "changed"
        self.assertEqual(event["id"], "snack-7")

    def test_accepts_the_edges(self):
        validate_event({"id": "a", "sku": "Z", "qty": 1})
        validate_event({"id": "9" + "x" * 63, "sku": "a.b_c:d-e", "qty": 1000000})

    def assertRejected(self, event, *words):
        with self.assertRaises(InvalidEvent) as ctx:
            validate_event(event)
        self.assertIsInstance(ctx.exception, ValueError)
        for word in words:
            self.assertIn(word, str(ctx.exception))

    def test_rejects_each_rule_and_names_the_field(self):
        good = {"id": "snack-7", "sku": "snack", "qty": 7}
        self.assertRejected(["id"], "dict")
        self.assertRejected(None, "dict")
        self.assertRejected({"id": "a", "sku": "b"}, "missing qty")
        self.assertRejected(dict(good, extra=1), "unexpected 'extra'")
        self.assertRejected({1: 1, "id": "a", "sku": "b", "qty": 1}, "unexpected 1")
        for bad_id in ("", "-a", ".a", "a b", "a/b", "é", "x" * 65, 7, None, b"abc", "a\n"):
            self.assertRejected(dict(good, id=bad_id), "id must be")
        for bad_sku in ("", "_s", "s!", ["s"]):
            self.assertRejected(dict(good, sku=bad_sku), "sku must be")
        for bad_qty in (0, -1, 1000001, True, False, 1.0, "7", None):
            self.assertRejected(dict(good, qty=bad_qty), "qty must be an int from 1 to 1000000")
        self.assertRejected(dict(good, qty=True), "(bool)")

    def test_does_not_modify_its_argument_on_failure(self):
        event = {"id": "a", "sku": "b", "qty": 0}
        with self.assertRaises(InvalidEvent):
            validate_event(event)
        self.assertEqual(event, {"id": "a", "sku": "b", "qty": 0})

    def test_canonical_form_and_digest_ignore_key_order(self):
        a = {"id": "a", "sku": "s", "qty": 1}
        b = {"qty": 1, "sku": "s", "id": "a"}
        self.assertEqual(canonical(a), '{"id":"a","qty":1,"sku":"s"}')
        self.assertEqual(canonical(a), canonical(b))
        self.assertEqual(digest(a), digest(b))
        self.assertNotEqual(digest(a), digest(dict(a, qty=2)))


class LoadsStrictTest(unittest.TestCase):
    def test_a_repeated_key_is_refused_at_any_depth(self):
        self.assertEqual(loads_strict(b'{"id": "a", "qty": 1}'), {"id": "a", "qty": 1})
        for data in (b'{"id": "a", "id": "b"}', b'[{"x": 1, "x": 1}]'):
            with self.assertRaises(ValueError) as ctx:
                loads_strict(data)
            self.assertIn("repeated key", str(ctx.exception))

    def test_bytes_that_are_not_utf8_are_a_value_error(self):
        with self.assertRaises(ValueError):
            loads_strict(b'{"id": "\xff"}')


class QuoteTest(unittest.TestCase):
    def test_the_kernel_quotes_a_value_by_one_rule_on_both_sides(self):
        """Issue 22: the event's messages and the sender's cut a long value alike (they had 80 and 120)."""
        long = ["x" * 500]
        self.assertEqual(len(show(long)), QUOTE_CHARS + len(" (list)"))
        self.assertTrue(show(long).endswith("... (list)"))
        self.assertEqual(show([1]), "[1] (list)")
        with self.assertRaises(InvalidEvent) as from_event:
            validate_event({"id": long, "sku": "s", "qty": 1})
        with self.assertRaises(ValueError) as from_sender:
            check_url(long)
        for caught in (from_event, from_sender):
            self.assertIn("got " + show(long), str(caught.exception))


if __name__ == "__main__":
    unittest.main()
