/// An open PCM (the real one keeps the snd_pcm_t pointer's bits).
struct PCMHandle: Hashable, Sendable {
    let raw: UInt
}
