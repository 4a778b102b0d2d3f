"""A letter as bytes and as text: front matter, MIME, rendering and parsing, a person's letter read as text."""
