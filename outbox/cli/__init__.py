"""outbox.cli: `python3 -m outbox`, the publisher's command line.

main builds the parser and maps errors to exit statuses; args holds the
argument types and the parser both command lines share, opargs the types
that read operator rules (kept out of `python -m sink`); ops the operator's
sub-commands; relay the relay's. Nothing here is imported by the kernel.
"""
