"""--json on stdout, DIR/<name>.json and DIR/class.json: the results as they are, language-neutral."""
import json


def dumps(result):
    return json.dumps(result, indent=2) + "\n"
