# Sourced by scripts/test and scripts/demo: checks Java, makes .venv, installs the project into it.
# Everything it needs comes from PyPI; it prints what to do when something is missing.

_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${STREAMJOIN_VENV:-$_root/.venv}"

_die() { printf 'streamjoin: %s\n' "$*" >&2; exit 1; }

# Java 17 or newer: Spark 4 runs on nothing older.
if ! command -v java >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ]; then
  _die "Java was not found. Spark 4 needs Java 17 or newer: install it (Debian: apt-get install openjdk-17-jre-headless) or set JAVA_HOME."
fi
_java="${JAVA_HOME:+$JAVA_HOME/bin/}java"
_jver="$("$_java" -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')"
_jmajor="${_jver%%.*}"
if [ -z "$_jmajor" ] || [ "$_jmajor" -lt 17 ] 2>/dev/null; then
  _die "Java ${_jver:-(unknown)} found at $(command -v "$_java"); Spark 4 needs Java 17 or newer."
fi

# Python 3.10 or newer, in a virtual environment of the project's own.
_py="${PYTHON:-python3}"
command -v "$_py" >/dev/null 2>&1 || _die "python3 was not found; install Python 3.10 or newer."
"$_py" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || _die "$("$_py" --version 2>&1) is too old; streamjoin needs Python 3.10 or newer (set PYTHON=...)."
if [ ! -x "$VENV/bin/python" ]; then
  echo "streamjoin: creating a virtual environment in $VENV" >&2
  "$_py" -m venv "$VENV" || _die "could not create $VENV (Debian: apt-get install python3-venv)."
fi

# Install (again) when pyproject.toml changed since the last install, or the set of the
# package's modules did: the install is editable in setuptools' strict mode, a tree of links
# under build/ to the repository's files that type checkers and IDEs follow (a new module
# needs a new link).
_stamp="$VENV/.streamjoin-installed"
_want="$(cksum < "$_root/pyproject.toml") $(cd "$_root" && ls -d */ */*.py */*/*.py 2>/dev/null | cksum)"
if [ ! -f "$_stamp" ] || [ "$(cat "$_stamp")" != "$_want" ]; then
  echo "streamjoin: installing the project and its dependencies into $VENV (first run takes a minute)" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip \
    && "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
         -e "$_root[spark,test,dev,postgres,docs]" --config-settings editable_mode=strict \
    || _die "pip install failed; see the messages above."
  echo "$_want" > "$_stamp"
fi

# Spark's Python workers must run this interpreter, or they will not find the packages.
export PYSPARK_PYTHON="$VENV/bin/python"
export PYSPARK_DRIVER_PYTHON="$VENV/bin/python"
export PATH="$VENV/bin:$PATH"
