"""The renderers: one module per format, each reading the result data of grader/results.py and nothing else.

terminal.py  the class table on stdout (one line per worker and why; -v every failed check);
jsonfile.py  --json and DIR/<name>.json, DIR/class.json: the results as they are;
csvfile.py   DIR/class.csv;            junit.py  DIR/junit.xml;
summary.py   DIR/index.html, the teacher's page: who failed which rule and why, first;
student.py   DIR/students/<name>.html, the page handed to one student;
gradescope.py  results.json in Gradescope's autograder format;
evidence.py and page.py: the evidence tables and the HTML shell the others share.
The language is chosen here, at the edge: a renderer takes `lang`, the results never do. Every string a
worker controls goes through grader/text.py's `shown` (or `csv_cell`), then the format's own escaping.
A new format is one new module here; it touches no grading code. Never runs anything, never writes files.
"""
