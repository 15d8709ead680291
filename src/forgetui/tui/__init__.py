"""forgetui's Textual UI. Everything that imports Textual lives under this package."""
