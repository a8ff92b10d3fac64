"""outbox.ops.backoff: exponential backoff with full jitter, a pure function of the attempt and a random source."""
import random
import unittest

from outbox.ops import backoff


class BackoffTest(unittest.TestCase):
    def test_bounds_grow_exponentially_up_to_the_cap(self):
        top = lambda: 1.0 - 1e-12
        bounds = [backoff.delay(n, 0.5, 10.0, rand=top) for n in range(1, 8)]
        for got, want in zip(bounds, (0.5, 1, 2, 4, 8, 10, 10)):
            self.assertAlmostEqual(got, want, places=6)
        self.assertEqual(backoff.delay(5, 0.5, 10.0, rand=lambda: 0.0), 0.0)
        self.assertEqual(backoff.delay(10 ** 6, 0.5, 10.0, rand=lambda: 0.5), 5.0)  # no overflow

    def test_full_jitter_spreads_over_the_whole_range(self):
        source = random.Random(7)
        draws = [backoff.delay(4, 1.0, 100.0, rand=source.random) for _ in range(2000)]
        self.assertTrue(all(0 <= d < 8.0 for d in draws))
        self.assertLess(min(draws), 0.4)
        self.assertGreater(max(draws), 7.6)
        self.assertAlmostEqual(sum(draws) / len(draws), 4.0, delta=0.4)

    def test_bad_arguments(self):
        for args in ((0, 1, 1), (True, 1, 1), (1, -1, 1), (1, 1, float("inf")), (1.5, 1, 1)):
            with self.assertRaises(ValueError):
                backoff.delay(*args)


if __name__ == "__main__":
    unittest.main()
