/**
 * Reads a byte stream as UTF-8 text, refusing it as soon as it passes `max` bytes: the stream is
 * cancelled and `tooLarge()` is thrown, so no more than `max` bytes are ever held.
 *
 * @example await readTextCapped(request.body, 1 << 20, () => new Error('too big'))
 */
export async function readTextCapped(
  stream: ReadableStream<Uint8Array> | null,
  max: number,
  tooLarge: () => Error,
): Promise<string> {
  if (!stream) return '';
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => {});
      throw tooLarge();
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return new TextDecoder().decode(chunks[0]);
  const all = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return new TextDecoder().decode(all);
}
