"""outbox/cli/stopping.py: the signals that stop `relay` and `sink serve` cleanly, on every platform."""
import signal
import unittest

from outbox.cli.stopping import STOP_SIGNALS


class StopSignalsTest(unittest.TestCase):
    def test_sigterm_and_ctrl_c_everywhere_and_ctrl_break_where_it_exists(self):
        expected = [signal.SIGTERM, signal.SIGINT] + ([signal.SIGBREAK] if hasattr(signal, "SIGBREAK") else [])
        self.assertEqual(list(STOP_SIGNALS), expected)

    def test_both_command_lines_install_a_handler_for_each(self):
        # Each handler only sets a flag: tests/test_outbox_cli_relay.py and tests/test_sink_cli.py send SIGTERM and
        # SIGINT to real processes; this holds both command lines to the one list (Ctrl-Break is Windows' only).
        import inspect
        from outbox.cli import relay
        from sink import cli
        self.assertIn("for sig in STOP_SIGNALS", inspect.getsource(relay.run_relay))
        self.assertIn("for sig in STOP_SIGNALS", inspect.getsource(cli))


if __name__ == "__main__":
    unittest.main()
