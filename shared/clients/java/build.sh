#!/bin/sh
# Compiles the Java client (javac, offline, incrementally: only when a source changed)
# into build/classes, its tests into build/test-classes and the example into
# build/examples. Gson comes from Debian (libgoogle-gson-java: /usr/share/java/gson.jar)
# or GSON_JAR. Prints the class path to run with.
set -e
here="$(cd "$(dirname "$0")" && pwd)"
gson="${GSON_JAR:-/usr/share/java/gson.jar}"
[ -f "$gson" ] || { echo "gson is missing: apt-get install libgoogle-gson-java (or set GSON_JAR)" >&2; exit 1; }
build="$here/build"
stamp="$build/.compiled"
if [ ! -f "$stamp" ] || [ -n "$(find "$here/src" "$here/examples" -name '*.java' -newer "$stamp" | head -1)" ]; then
  rm -rf "$build/classes" "$build/test-classes" "$build/examples"
  mkdir -p "$build"
  javac --release 17 -Xlint:all -Werror -d "$build/classes" -cp "$gson" $(find "$here/src/main" -name '*.java') >&2
  javac --release 17 -Xlint:all -Werror -d "$build/test-classes" -cp "$build/classes:$gson" $(find "$here/src/test" -name '*.java') >&2
  javac --release 17 -Xlint:all -Werror -d "$build/examples" -cp "$build/classes:$gson" "$here/examples/Hold.java" >&2
  touch "$stamp"
fi
echo "$build/classes:$gson"
