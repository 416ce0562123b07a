/// Why configuring a PCM failed.
enum PCMConfigurationError: Error, Hashable {
    case formatNotSupported(String)
    case failed(operation: String, code: Int32)
}
