/// The version of extensiond, printed by `extensiond --version`. The Debian package's upstream
/// version (debian/changelog) is the same: debian/rules refuses to build when they differ.
let extensiondVersion = "0.1.0"
