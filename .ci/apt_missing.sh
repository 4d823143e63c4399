# Sourced by the .ci install scripts: apt_install_missing TAG PKG... installs those of the
# Debian packages not installed yet (one apt-get update first), quick when all are there.
apt_install_missing() {
  local tag=$1; shift
  local as_root=() missing=() p
  [ "$(id -u)" -eq 0 ] || as_root=(sudo)
  for p in "$@"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -qx 'install ok installed' \
      || missing+=("$p")
  done
  [ "${#missing[@]}" -gt 0 ] || return 0
  echo "$tag: apt-get install ${missing[*]}"
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
