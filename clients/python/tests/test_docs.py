"""Offline checks of the repository's documents: every relative link and anchor resolves, PROTOCOL.md's contents
list names every section and subsection in order, DESIGN.md stays under 20 KiB, and no document cites the team's
files outside the repository. No server needed."""

import os
import re
import unittest

from support import REPO

DOCS = os.path.join(REPO, "docs")
DESIGN_LIMIT_BYTES = 20 * 1024
SKIPPED_DIRECTORIES = {".git", "target", "node_modules", "__pycache__"}


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _markdown_files():
    for directory, names, files in os.walk(REPO):
        names[:] = [name for name in names if name not in SKIPPED_DIRECTORIES and not name.startswith(".")]
        for name in files:
            if name.endswith(".md"):
                yield os.path.join(directory, name)


def _headings(text):
    """(level, title) of every heading outside code fences."""
    headings = []
    in_fence = False
    for line in text.split("\n"):
        if line.startswith("```"):
            in_fence = not in_fence
        elif not in_fence:
            match = re.match(r"^(#{1,6}) (.*)$", line)
            if match:
                headings.append((len(match.group(1)), match.group(2).strip()))
    return headings


def _anchor(title):
    """GitHub's anchor of a heading: lower case, punctuation but hyphens and underscores dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", title.replace("`", "").lower()).replace(" ", "-")


def _anchors(text):
    anchors = set()
    seen = {}
    for _, title in _headings(text):
        anchor = _anchor(title)
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        anchors.add(anchor if count == 0 else "%s-%d" % (anchor, count))
    return anchors


class LinksTest(unittest.TestCase):
    def test_should_resolve_every_relative_link_and_anchor_of_every_document(self):
        broken = []
        for path in _markdown_files():
            for target in re.findall(r"\]\(([^)\s]+)\)", _read(path)):
                if re.match(r"^[a-z]+:", target):
                    continue
                name, _, anchor = target.partition("#")
                resolved = path if not name else os.path.normpath(os.path.join(os.path.dirname(path), name))
                if not os.path.exists(resolved):
                    broken.append("%s: %s (no such file)" % (os.path.relpath(path, REPO), target))
                elif anchor and resolved.endswith(".md") and anchor not in _anchors(_read(resolved)):
                    broken.append("%s: %s (no such heading)" % (os.path.relpath(path, REPO), target))
        self.assertEqual(broken, [])

    def test_should_name_a_section_of_design_or_protocol_that_exists_when_code_links_to_one(self):
        broken = []
        for directory, names, files in os.walk(REPO):
            names[:] = [name for name in names if name not in SKIPPED_DIRECTORIES and not name.startswith(".")]
            for name in files:
                if not name.endswith((".java", ".py", ".md")):
                    continue
                path = os.path.join(directory, name)
                for document, anchor in re.findall(r"(DESIGN|PROTOCOL)\.md#([\w\-]+)", _read(path)):
                    if anchor not in _anchors(_read(os.path.join(DOCS, document + ".md"))):
                        broken.append("%s: %s.md#%s" % (os.path.relpath(path, REPO), document, anchor))
        self.assertEqual(broken, [])


class ProtocolContentsTest(unittest.TestCase):
    def test_should_list_every_section_and_subsection_in_order(self):
        text = _read(os.path.join(DOCS, "PROTOCOL.md"))
        start = text.index("\nContents\n")
        contents = text[start : text.index("\n---\n", start)]
        listed = re.findall(r"^( *)- \[([^\]]+)\]\(#([^)]+)\)", contents, re.M)
        sections = [(level, title) for level, title in _headings(text) if level in (2, 3)]
        self.assertEqual([(2 + len(indent) // 2, title) for indent, title, _ in listed], sections)
        self.assertEqual([anchor for _, _, anchor in listed], [_anchor(title) for _, title in sections])


class DesignTest(unittest.TestCase):
    def test_should_keep_design_under_its_size_limit(self):
        size = os.path.getsize(os.path.join(DOCS, "DESIGN.md"))
        self.assertLess(
            size,
            DESIGN_LIMIT_BYTES,
            "DESIGN.md is for the engineer who changes the code; measurements go to docs/results/",
        )

    def test_should_cite_nothing_outside_the_repository(self):
        for path in _markdown_files():
            text = _read(path)
            self.assertNotIn("shared/SPEC", text, path)
            self.assertIsNone(re.search(r"SPEC(\.md)? ?§", text), path)


if __name__ == "__main__":
    unittest.main()
