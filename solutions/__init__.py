"""The reference implementations: one module per concept, the same names and signatures as exercises/.

Public names are the course's (kata/concepts/course.toml), imported from their module when first used.
"""

from kata import export_concepts

__all__, __getattr__, __dir__ = export_concepts(__name__)
