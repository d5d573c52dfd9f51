"""The course data and what the tools read of it; a bottom layer, importing no other part of kata.

    course.toml     the concepts in teaching order: titles, points, public names, hints, mistakes, variants
    manifest.py     the course as the tools read it: numbers, GUIDE sections and the point total, derived
    stub.py         the one error an untouched stub raises, and the one place that recognises it
    impl.py         loading an implementation: exercises, solutions, a submitted folder, the reference patched by
                    a catalogue entry
    patches.py      applying a unified diff by content: how a catalogue entry (mistakes/, variants/) becomes a module
    sources.py      what a concept module's source says, read without importing it (stubs left, functions written)
    arguments.py    the command line's argument types: a concept by name, a positive number
"""
