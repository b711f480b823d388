import { withDogpile } from 'dogpile-guard/fetch';
import { cache, findProduct } from '../../../lib/cache';

// Next.js does not cache this route itself; dogpile-guard does, shared through Redis.
export const dynamic = 'force-dynamic';

// A route handler wrapped as it is: Next's second argument ({ params }) is passed on.
export const GET = withDogpile(
  async (_request: Request, { params }: { params: Promise<{ id: string }> }) => {
    const { id } = await params;
    return Response.json(await findProduct(id));
  },
  { cache, ttl: '30s' },
);
