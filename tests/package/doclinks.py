#!/usr/bin/python3
"""Checks that every relative link and picture in the Markdown files under
DIR resolves where they are installed: the file (or folder) a link names
exists, and a link into a Markdown file with an #anchor names a heading
of it. Usage: doclinks.py DIR [--min-files N]. Prints each broken link as
FILE:LINE: TARGET, and exits 1 when there is one (or fewer files than N)."""
import os
import re
import sys

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path):
    """GitHub's heading anchors of a Markdown file."""
    found = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"#+\s+(.*?)\s*$", line)
            if m:
                text = re.sub(r"[^\w\- ]", "", m.group(1).lower())
                found.add(text.replace(" ", "-"))
    return found


def check(top):
    broken, files, links = [], 0, 0
    for root, _, names in os.walk(top):
        for name in sorted(names):
            if not name.endswith(".md"):
                continue
            files += 1
            path = os.path.join(root, name)
            with open(path, encoding="utf-8") as f:
                lines = f.read().split("\n")
            for number, line in enumerate(lines, 1):
                for target in LINK.findall(line):
                    if re.match(r"[a-z]+:", target):
                        continue
                    links += 1
                    file_part, _, anchor = target.partition("#")
                    dest = os.path.normpath(os.path.join(root, file_part)) if file_part else path
                    if not os.path.exists(dest):
                        broken.append("%s:%d: %s" % (path, number, target))
                    elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                        broken.append("%s:%d: %s (no such heading)" % (path, number, target))
    return broken, files, links


def main():
    top = sys.argv[1]
    least = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--min-files" else 1
    broken, files, links = check(top)
    for line in broken:
        print(line)
    print("%d Markdown files, %d relative links, %d broken" % (files, links, len(broken)))
    sys.exit(1 if broken or files < least else 0)


if __name__ == "__main__":
    main()
