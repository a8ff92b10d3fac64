"""A JSON Schema validator for the subset docs/report.schema.json uses, standard library only.

Keywords: type (a name or a list), properties, required, additionalProperties
(false or a schema), items, enum, const, minimum, pattern, anyOf, $ref to
"#/$defs/..."; annotations ($schema, $id, title, description) are ignored.
Any other keyword is an error, so the schema cannot quietly use more than
this checks.
"""
import re

ANNOTATIONS = {"$schema", "$id", "title", "description"}
KEYWORDS = {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "minimum", "pattern",
            "anyOf", "$ref", "$defs"}
TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


class SchemaError(Exception):
    """The schema uses a keyword this validator does not know."""


def errors(instance, schema, root=None, path="$"):
    """Every way `instance` breaks `schema`, as "path: what" strings (empty if it is valid)."""
    root = schema if root is None else root
    unknown = set(schema) - KEYWORDS - ANNOTATIONS
    if unknown:
        raise SchemaError("%s: keywords %s are outside the subset" % (path, sorted(unknown)))
    if "$ref" in schema:
        target = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return errors(instance, target, root, path)
    found = []
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(TYPES[kind](instance) for kind in kinds):
            return ["%s: %r is not of type %s" % (path, instance, "/".join(kinds))]
    if "const" in schema and instance != schema["const"]:
        found.append("%s: %r is not %r" % (path, instance, schema["const"]))
    if "enum" in schema and instance not in schema["enum"]:
        found.append("%s: %r is not one of %r" % (path, instance, schema["enum"]))
    if "minimum" in schema and TYPES["number"](instance) and instance < schema["minimum"]:
        found.append("%s: %r is below %r" % (path, instance, schema["minimum"]))
    if "pattern" in schema and isinstance(instance, str) and not re.search(schema["pattern"], instance):
        found.append("%s: %r does not match %s" % (path, instance, schema["pattern"]))
    if "anyOf" in schema:
        if all(errors(instance, option, root, path) for option in schema["anyOf"]):
            found.append("%s: matches none of anyOf" % path)
    if isinstance(instance, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in instance:
                found.append("%s: %r is missing" % (path, name))
        extra = schema.get("additionalProperties", True)
        for name, value in instance.items():
            where = "%s.%s" % (path, name)
            if name in properties:
                found.extend(errors(value, properties[name], root, where))
            elif extra is False:
                found.append("%s: not allowed" % where)
            elif isinstance(extra, dict):
                found.extend(errors(value, extra, root, where))
    if isinstance(instance, list) and "items" in schema:
        for i, item in enumerate(instance):
            found.extend(errors(item, schema["items"], root, "%s[%d]" % (path, i)))
    return found
