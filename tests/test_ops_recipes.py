"""examples/ops/: the systemd units, the cron line, the Nagios objects and the Prometheus config, as copied.

What can be checked on this machine is: each command line parses with the
kit's own parser; `systemd-analyze verify` accepts the units where it is
installed (the binary path pointed at a stand-in); the cron line, run by `sh`
from another folder with cron's bare PATH, writes outbox.prom whole; the
Nagios command, its $ARGn$ filled from the service, prints one plugin line;
`promtool check config` accepts the scrape config where promtool is installed.
"""
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys

from outbox import init_store, intake
from outbox.cli import main as outbox_cli
from sink import cli as sink_cli
from tests.support import DEADLINE, ROOT, TempDirTestCase, posix_only

OPS = os.path.join(ROOT, "examples", "ops")
BIN = "/usr/local/bin/"
PLUGIN_LINE = re.compile(r"OUTBOX (OK|WARNING|CRITICAL|UNKNOWN) - [^|\n]+ \| (\S+=\S+ ?)+\n\Z")


def read(name):
    with open(os.path.join(OPS, name), encoding="utf-8") as f:
        return f.read()


def unit_value(text, key):
    values = re.findall(r"^%s=(.*)$" % key, text, re.M)
    assert len(values) == 1, (key, values)
    return values[0]


class RecipesTest(TempDirTestCase):
    def stand_ins(self):
        """A folder of `outbox` and `outbox-sink` scripts that run this checkout, as pip's would run the kit."""
        folder = self.path("bin")
        os.mkdir(folder)
        for name, module in (("outbox", "outbox"), ("outbox-sink", "sink")):
            path = os.path.join(folder, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write("#!/bin/sh\nPYTHONPATH=%s exec %s -m %s \"$@\"\n" % (
                    shlex.quote(ROOT), shlex.quote(sys.executable), module))
            os.chmod(path, stat.S_IRWXU)
        return folder

    def source_db(self):
        db = self.path("source.db")
        con = init_store(db)
        intake(con, {"id": "a", "sku": "s", "qty": 1})
        con.close()
        return db

    def test_the_units_commands_parse_and_their_do_not_restart_codes_are_the_kits(self):
        for name, parse, prevent in (
                ("outbox-sink.service", sink_cli._build_parser().parse_args, {sink_cli.EXIT_DB, 2}),
                ("outbox-relay.service", outbox_cli.build_parser().parse_args, {outbox_cli.EXIT_ALERT, 2})):
            with self.subTest(unit=name):
                text = read(name)
                command = shlex.split(unit_value(text, "ExecStart"))
                self.assertTrue(command[0].startswith(BIN), command[0])
                parse(command[1:])  # SystemExit(2) if a flag is wrong
                self.assertEqual(unit_value(text, "Restart"), "on-failure")
                self.assertEqual({int(code) for code in unit_value(text, "RestartPreventExitStatus").split()},
                                 prevent)

    def test_systemd_analyze_verifies_the_units(self):
        analyze = shutil.which("systemd-analyze")
        if analyze is None:
            self.skipTest("systemd-analyze is not installed")
        folder = self.stand_ins()
        for name in ("outbox-sink.service", "outbox-relay.service"):
            with self.subTest(unit=name):
                unit = self.path(name)
                with open(unit, "w", encoding="utf-8") as f:
                    f.write(read(name).replace(BIN, folder + "/"))
                done = subprocess.run([analyze, "verify", unit], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      universal_newlines=True, timeout=DEADLINE * 6)
                self.assertEqual(done.returncode, 0, done.stdout)

    @posix_only("sh, and #!/bin/sh scripts made executable by chmod as stand-ins for the installed commands: cron's "
                "line is a POSIX shell command")
    def test_the_cron_line_writes_the_textfile_whole_from_another_folder(self):
        folder, db = self.stand_ins(), self.source_db()
        textfiles = self.path("node-exporter")
        os.mkdir(textfiles)
        lines = [line for line in read("outbox-status.cron").splitlines() if line and not line.startswith("#")]
        self.assertEqual(len(lines), 1)
        fields = lines[0].split(None, 6)
        self.assertEqual(fields[:5], ["*"] * 5)
        command = fields[6].replace(BIN, folder + "/").replace("/var/lib/prometheus/node-exporter", textfiles)
        command = command.replace("/var/lib/outbox/source.db", db)
        done = subprocess.run(["sh", "-c", command], cwd="/", env={"PATH": "/usr/bin:/bin", "HOME": self.tmp},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=DEADLINE * 3)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(os.listdir(textfiles), ["outbox.prom"])
        with open(os.path.join(textfiles, "outbox.prom"), encoding="utf-8") as f:
            text = f.read()
        self.assertIn("\noutbox_pending 1\n", text)
        self.assertRegex(text, r"\noutbox_status_timestamp_seconds [0-9.e+]+\n")

    @posix_only("#!/bin/sh scripts made executable by chmod as stand-ins for the installed commands, which Nagios' "
                "command_line runs directly")
    def test_the_nagios_command_prints_one_plugin_line(self):
        folder, db = self.stand_ins(), self.source_db()
        text = read("nagios.cfg")
        command_line = re.search(r"^\s*command_line\s+(.*)$", text, re.M).group(1)
        check = re.search(r"^\s*check_command\s+check_outbox!(.*)$", text, re.M).group(1).split("!")
        check[0] = db
        for n, value in enumerate(check, 1):
            command_line = command_line.replace("$ARG%d$" % n, value)
        self.assertNotIn("$", command_line)
        done = subprocess.run(shlex.split(command_line.replace(BIN, folder + "/")), cwd="/",
                              env={"PATH": "/usr/bin:/bin"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=DEADLINE * 3)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertRegex(done.stdout, PLUGIN_LINE)

    def test_promtool_checks_the_scrape_config_with_the_rules_beside_it(self):
        promtool = shutil.which("promtool")
        if promtool is None:
            self.skipTest("promtool is not installed (apt-get install prometheus gives it)")
        shutil.copy(os.path.join(OPS, "prometheus.yml"), self.path("prometheus.yml"))
        shutil.copy(os.path.join(ROOT, "docs", "alerts.yml"), self.path("alerts.yml"))
        done = subprocess.run([promtool, "check", "config", self.path("prometheus.yml")], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True, timeout=DEADLINE * 6)
        self.assertEqual(done.returncode, 0, done.stdout)
        self.assertIn("SUCCESS", done.stdout)
