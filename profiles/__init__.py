"""Built-in platform profiles (shipped in the wheel as kgc.profiles)."""
