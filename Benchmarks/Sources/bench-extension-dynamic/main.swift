import BenchExtensionKit
runBenchExtension()
