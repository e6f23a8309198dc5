"""Reports: the terminal tables, HTML, JUnit XML, and comparisons between runs."""
