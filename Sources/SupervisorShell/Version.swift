/// The version of extensiond, printed by `extensiond --version` and written into a hand-over
/// document. The Debian package's upstream version (debian/changelog) is the same:
/// debian/rules refuses to build when they differ.
public let daemonVersion = "0.1.0"
