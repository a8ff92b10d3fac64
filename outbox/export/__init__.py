"""outbox.export: figures and times written for other programs to read.

The Prometheus text format, the node-exporter textfile, the Nagios plugin
lines and the time format. Pure formatting and file writing, no SQL; the sink
may import prometheus and timestamps from here (tests/test_layout.py names
them) so that both sides' lines and gauges read alike.
"""
