#!/usr/bin/env bash
# Build the Debian package with Debian's own tools (debhelper, dh-python/pybuild,
# dpkg-buildpackage) from this checkout's files: build/deb/hpccd_<version>_<arch>.deb.
#
#   sudo bash scripts/run.sh deb      (the build dependencies from apt, then this script)
#
# The build runs on a copy in build/deb/ (the files git knows, as they are now),
# so the checkout is not touched.  Debian 12's python3-setuptools (66) reads the
# SPDX string form of pyproject.toml's license (PEP 639) as an error; the copy
# gets the table form it knows.  docs/install.md, "Debian package".
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
VERSION=$(dpkg-parsechangelog -S Version)
OUT=build/deb
SRC=$OUT/hpccd-$VERSION
rm -rf "$OUT"
mkdir -p "$SRC"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -P -t "$SRC"
sed -i 's/^license = "\(.*\)"$/license = {text = "\1"}/' "$SRC/pyproject.toml"
(cd "$SRC" && dpkg-buildpackage -b -us -uc) >"$OUT/build.log" 2>&1 || {
	tail -30 "$OUT/build.log" >&2
	echo "scripts/build_deb.sh: dpkg-buildpackage failed: $OUT/build.log" >&2
	exit 1
}
ls "$OUT"/*.deb
