#!/usr/bin/env python3
"""Converts a Whisper model in CTranslate2 format to whisper.cpp's ggml format.

    ct2_to_ggml.py CT2_MODEL_DIR TEMPLATE_GGML OUT_GGML

CT2_MODEL_DIR  a CTranslate2 WhisperSpec model (model.bin, vocabulary.txt), float16 or float32
TEMPLATE_GGML  a ggml model of the same size whose header is checked against the model,
               whose mel filters are copied and whose vocabulary sets the token count and
               checks the model's (whisper.cpp's for-tests-ggml-*.bin carry exactly these,
               without weights)
OUT_GGML       written as OUT_GGML.tmp, then renamed

Only numpy. What it does:
  - reads CTranslate2's model.bin (binary version 6: a list of named, typed arrays);
  - splits the fused attention projections (self attention: query/key/value in one matrix;
    cross attention: key/value in one) into whisper.cpp's separate tensors, dropping the
    key bias that Whisper does not have (CTranslate2 stores zeros there; checked);
  - renames to whisper.cpp's tensor names (encoder.blocks.N.attn.query.weight, ...);
  - writes matrices and convolution kernels as float16 and everything else (biases, layer
    norms, positional embeddings) as float32, the types whisper.cpp's loader expects for an
    ftype=1 (F16) model.
"""
import os
import struct
import sys

import numpy as np

GGML_MAGIC = 0x67676D6C  # "ggml"

# CTranslate2's DataType ids as stored in model.bin.
CT2_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}


def read_ct2(path):
    """Returns {name: numpy array} of a CTranslate2 model.bin, aliases resolved."""
    data = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        values = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return values

    def string():
        nonlocal pos
        (n,) = take("H")
        text = data[pos:pos + n].rstrip(b"\0").decode()
        pos += n
        return text

    (version,) = take("I")
    if version != 6:
        raise SystemExit(f"ct2_to_ggml: model.bin binary version {version}, only 6 is known")
    spec = string()
    if spec != "WhisperSpec":
        raise SystemExit(f"ct2_to_ggml: model spec {spec!r}, expected WhisperSpec")
    take("I")  # spec revision
    (count,) = take("I")
    variables = {}
    for _ in range(count):
        name = string()
        (rank,) = take("B")
        shape = take("I" * rank)
        (dtype_id,) = take("B")
        (nbytes,) = take("I")
        if dtype_id not in CT2_DTYPES:
            raise SystemExit(f"ct2_to_ggml: {name}: unsupported data type id {dtype_id}")
        array = np.frombuffer(data, CT2_DTYPES[dtype_id], nbytes // np.dtype(CT2_DTYPES[dtype_id]).itemsize, pos)
        variables[name] = array.reshape(shape)
        pos += nbytes
    (aliases,) = take("I")
    for _ in range(aliases):
        alias, target = string(), string()
        variables[alias] = variables[target]
    if pos != len(data):
        raise SystemExit(f"ct2_to_ggml: {len(data) - pos} bytes left over in {path}")
    return variables


def read_template(path):
    """Returns (hparams tuple of 11 ints, (n_mel, n_fft), mel filter bytes with their header, tokens)."""
    data = open(path, "rb").read()
    (magic,) = struct.unpack_from("<I", data, 0)
    if magic != GGML_MAGIC:
        raise SystemExit(f"ct2_to_ggml: {path} is not a ggml model")
    hparams = struct.unpack_from("<11i", data, 4)
    pos = 48
    n_mel, n_fft = struct.unpack_from("<2i", data, pos)
    mel_end = pos + 8 + 4 * n_mel * n_fft
    mel = data[pos:mel_end]
    pos = mel_end
    (n_vocab,) = struct.unpack_from("<i", data, pos)
    pos += 4
    tokens = []
    for _ in range(n_vocab):
        (length,) = struct.unpack_from("<I", data, pos)
        pos += 4
        tokens.append(data[pos:pos + length])
        pos += length
    return hparams, (n_mel, n_fft), mel, tokens


def gpt2_byte_decoder():
    """The inverse of GPT-2's byte-to-printable-character table (how BPE vocabularies spell bytes)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def vocabulary(ct2_dir, template_tokens):
    """The ggml vocabulary (count, then length-prefixed raw bytes) for the template's token count.

    Built from the model's own vocabulary.txt, whose byte-level BPE spelling is turned back
    into raw bytes. The template's tokens must be the same, except that the test models carry
    U+FFFD where a token is not valid UTF-8 by itself (344 byte tokens of tiny.en): raw bytes
    keep a character split over tokens intact in the output, which whisper.cpp's official
    models do too.
    """
    decoder = gpt2_byte_decoder()
    words = open(os.path.join(ct2_dir, "vocabulary.txt"), encoding="utf-8").read().split("\n")
    out = [struct.pack("<i", len(template_tokens))]
    for i, token in enumerate(template_tokens):
        word = words[i]
        if word.startswith("<|") and word.endswith("|>"):
            raw = word.encode()
        else:
            raw = bytes(decoder[c] for c in word)
        if raw != token and raw.decode("utf-8", "replace").encode() != token:
            raise SystemExit(f"ct2_to_ggml: token {i}: template {token!r}, model {word!r}: vocabularies differ")
        out.append(struct.pack("<I", len(raw)) + raw)
    return b"".join(out)


def split_rows(array, parts):
    """A fused projection's weight or bias, cut by rows into its parts."""
    rows = array.shape[0] // parts
    if rows * parts != array.shape[0]:
        raise SystemExit(f"ct2_to_ggml: cannot split {array.shape} into {parts}")
    return [array[i * rows:(i + 1) * rows] for i in range(parts)]


def no_key_bias(bias, where):
    if np.any(bias.astype(np.float32) != 0):
        raise SystemExit(f"ct2_to_ggml: {where}: non-zero key bias, which whisper.cpp has no tensor for")


def self_attention(prefix, ct2, v):
    # linear_0 is query, key and value stacked by rows; linear_1 the output projection.
    q_w, k_w, v_w = split_rows(v[ct2 + "/linear_0/weight"], 3)
    q_b, k_b, v_b = split_rows(v[ct2 + "/linear_0/bias"], 3)
    no_key_bias(k_b, ct2)
    yield prefix + ".query.weight", q_w
    yield prefix + ".query.bias", q_b
    yield prefix + ".key.weight", k_w
    yield prefix + ".value.weight", v_w
    yield prefix + ".value.bias", v_b
    yield prefix + ".out.weight", v[ct2 + "/linear_1/weight"]
    yield prefix + ".out.bias", v[ct2 + "/linear_1/bias"]


def ggml_tensors(v, n_audio_layer, n_text_layer):
    """Yields (whisper.cpp name, array) in whisper.cpp's naming, from CTranslate2's variables."""

    def linear(prefix, ct2):
        yield prefix + ".weight", v[ct2 + "/weight"]
        yield prefix + ".bias", v[ct2 + "/bias"]

    def norm(prefix, ct2):
        yield prefix + ".weight", v[ct2 + "/gamma"]
        yield prefix + ".bias", v[ct2 + "/beta"]

    yield "encoder.positional_embedding", v["encoder/position_encodings/encodings"]
    yield "encoder.conv1.weight", v["encoder/conv1/weight"]
    yield "encoder.conv1.bias", v["encoder/conv1/bias"].reshape(-1, 1)
    yield "encoder.conv2.weight", v["encoder/conv2/weight"]
    yield "encoder.conv2.bias", v["encoder/conv2/bias"].reshape(-1, 1)
    for i in range(n_audio_layer):
        b, c = f"encoder.blocks.{i}", f"encoder/layer_{i}"
        yield from self_attention(b + ".attn", c + "/self_attention", v)
        yield from norm(b + ".attn_ln", c + "/self_attention/layer_norm")
        yield from linear(b + ".mlp.0", c + "/ffn/linear_0")
        yield from linear(b + ".mlp.2", c + "/ffn/linear_1")
        yield from norm(b + ".mlp_ln", c + "/ffn/layer_norm")
    yield from norm("encoder.ln_post", "encoder/layer_norm")

    yield "decoder.positional_embedding", v["decoder/position_encodings/encodings"]
    yield "decoder.token_embedding.weight", v["decoder/embeddings/weight"]
    for i in range(n_text_layer):
        b, c = f"decoder.blocks.{i}", f"decoder/layer_{i}"
        yield from self_attention(b + ".attn", c + "/self_attention", v)
        yield from norm(b + ".attn_ln", c + "/self_attention/layer_norm")
        # Cross attention: linear_0 is the query, linear_1 the fused key/value, linear_2 the output.
        yield from linear(b + ".cross_attn.query", c + "/attention/linear_0")
        k_w, v_w = split_rows(v[c + "/attention/linear_1/weight"], 2)
        k_b, v_b = split_rows(v[c + "/attention/linear_1/bias"], 2)
        no_key_bias(k_b, c + "/attention")
        yield b + ".cross_attn.key.weight", k_w
        yield b + ".cross_attn.value.weight", v_w
        yield b + ".cross_attn.value.bias", v_b
        yield from linear(b + ".cross_attn.out", c + "/attention/linear_2")
        yield from norm(b + ".cross_attn_ln", c + "/attention/layer_norm")
        yield from linear(b + ".mlp.0", c + "/ffn/linear_0")
        yield from linear(b + ".mlp.2", c + "/ffn/linear_1")
        yield from norm(b + ".mlp_ln", c + "/ffn/layer_norm")
    yield from norm("decoder.ln", "decoder/layer_norm")


def stored_as_f16(name, array):
    """whisper.cpp's F16 model: matrices and convolution kernels in f16, the rest in f32."""
    if array.ndim < 2:
        return False
    if name.endswith("positional_embedding") or name in ("encoder.conv1.bias", "encoder.conv2.bias"):
        return False
    return True


def main(argv):
    if len(argv) != 4:
        raise SystemExit(__doc__)
    ct2_dir, template_path, out_path = argv[1:]
    v = read_ct2(os.path.join(ct2_dir, "model.bin"))
    hparams, (n_mel, n_fft), mel, tokens = read_template(template_path)
    (n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer,
     n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, _ftype) = hparams

    # The template must describe this model.
    flags = {k: int(v[k]) for k in ("decoder/scale_embeddings", "decoder/pre_norm")}
    checks = {
        "n_vocab": (n_vocab, v["decoder/embeddings/weight"].shape[0]),
        "n_text_state": (n_text_state, v["decoder/embeddings/weight"].shape[1]),
        "n_audio_ctx": (n_audio_ctx, v["encoder/position_encodings/encodings"].shape[0]),
        "n_audio_state": (n_audio_state, v["encoder/position_encodings/encodings"].shape[1]),
        "n_text_ctx": (n_text_ctx, v["decoder/position_encodings/encodings"].shape[0]),
        "n_audio_head": (n_audio_head, int(v["encoder/num_heads"])),
        "n_text_head": (n_text_head, int(v["decoder/num_heads"])),
        "n_audio_layer": (n_audio_layer, sum(1 for k in v if k.startswith("encoder/layer_") and k.endswith("/ffn/linear_0/weight"))),
        "n_text_layer": (n_text_layer, sum(1 for k in v if k.startswith("decoder/layer_") and k.endswith("/ffn/linear_0/weight"))),
        "n_mels": (n_mels, v["encoder/conv1/weight"].shape[1]),
        "mel filters": (n_mel, n_mels),
        "decoder/scale_embeddings": (0, flags["decoder/scale_embeddings"]),
        "decoder/pre_norm": (1, flags["decoder/pre_norm"]),
    }
    for what, (want, got) in checks.items():
        if want != got:
            raise SystemExit(f"ct2_to_ggml: {what}: template/Whisper {want}, model {got}")
    vocab = vocabulary(ct2_dir, tokens)

    tmp = out_path + ".tmp"
    count = 0
    with open(tmp, "wb") as out:
        out.write(struct.pack("<I", GGML_MAGIC))
        out.write(struct.pack("<11i", n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer,
                              n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, 1))
        out.write(mel)
        out.write(vocab)
        for name, array in ggml_tensors(v, n_audio_layer, n_text_layer):
            f16 = stored_as_f16(name, array)
            array = np.ascontiguousarray(array, dtype=np.float16 if f16 else np.float32)
            encoded = name.encode()
            out.write(struct.pack("<3i", array.ndim, len(encoded), 1 if f16 else 0))
            out.write(struct.pack(f"<{array.ndim}i", *reversed(array.shape)))  # ggml: innermost first
            out.write(encoded)
            out.write(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())
            count += 1
    expected = 5 + 2 + 15 * n_audio_layer + 4 + 24 * n_text_layer
    if count != expected:
        os.unlink(tmp)
        raise SystemExit(f"ct2_to_ggml: wrote {count} tensors, whisper.cpp expects {expected}")
    os.replace(tmp, out_path)
    print(f"ct2_to_ggml: {out_path}: {count} tensors, {os.path.getsize(out_path)} bytes")


if __name__ == "__main__":
    main(sys.argv)
