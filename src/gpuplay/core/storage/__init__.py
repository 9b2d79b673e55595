"""Files and settings: atomic writes, guarded loading, escaped text, number bounds, the state folder, config."""
