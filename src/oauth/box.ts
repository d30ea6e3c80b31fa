/** Confidentiality for credentials at rest: AES-256-GCM under an HKDF-derived key, AAD-bound. */
export class SecretBox {
  private constructor(private readonly key: CryptoKey) {}

  static async create(secret: Uint8Array, label: string): Promise<SecretBox> {
    void secret;
    void label;
    throw new Error('todo');
  }

  async seal(value: unknown, aad: string): Promise<string> {
    void this.key;
    void value;
    void aad;
    throw new Error('todo');
  }

  /** undefined on any failure. */
  async open(text: string, aad: string): Promise<unknown | undefined> {
    void text;
    void aad;
    throw new Error('todo');
  }
}
