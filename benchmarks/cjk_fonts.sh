#!/usr/bin/env bash
# Fonts for Chinese, Japanese, Korean and emoji, for the browser benchmarks only
# (benchmarks/README.md "Scrolling back: the fonts of a long chat"): a user's machine has
# such fonts; a bare Debian machine has none, and then every such character's fallback-font
# ask fails. This downloads Debian's fonts-noto-cjk and fonts-noto-color-emoji (about 66 MB,
# from the Debian mirror), unpacks them into a folder (no root, nothing installed) and
# writes a fontconfig file that adds them to the system's. Then run a benchmark with
#   FONTCONFIG_FILE=<folder>/fonts.conf .venv/bin/python benchmarks/browser_long_chat.py ...
# (Chromium and every process started from it read that file).
#
#   benchmarks/cjk_fonts.sh [folder]      default: ~/.cache/nbstream-fonts
set -euo pipefail
dir=${1:-$HOME/.cache/nbstream-fonts}
mkdir -p "$dir/deb" "$dir/root"
cd "$dir/deb"
apt-get download fonts-noto-cjk fonts-noto-color-emoji
for d in ./*.deb; do dpkg-deb -x "$d" "$dir/root"; done
cat > "$dir/fonts.conf" <<CONF
<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig>
  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>
  <dir>$dir/root/usr/share/fonts</dir>
  <cachedir>$dir/cache</cachedir>
</fontconfig>
CONF
echo "FONTCONFIG_FILE=$dir/fonts.conf"
FONTCONFIG_FILE="$dir/fonts.conf" fc-list : family | grep -E 'CJK|Emoji' | sort -u | head -3
