import { describe, expect, it } from 'vitest';
import { openApiDocument } from '../../../src/api/openapi.js';

type Operation = { get: { parameters: { name: string; in: string }[] } };
const paths = openApiDocument()['paths'] as Record<string, Operation>;
const names = (path: string, where: 'query' | 'path') => (paths[path]?.get.parameters ?? []).filter((p) => p.in === where).map((p) => p.name);

describe('the OpenAPI document', () => {
  it('lists the query parameters an item form reads, without the paging it ignores', () => {
    expect(names('/v3/REST/toplinkclicked/{id}', 'query')).toEqual(expect.arrayContaining(['CampaignID', 'ActualClicks', 'Contact', 'Message']));
    expect(names('/v3/REST/geostatistics/{country}', 'query')).toEqual(expect.arrayContaining(['CampaignID', 'FromTS', 'ToTS']));
    expect(names('/v3/REST/message/{id}', 'query').sort()).toEqual(['ShowContactAlt', 'ShowCustomID', 'ShowSubject']);
    expect(names('/v3/REST/listrecipientstatistics/{id}', 'query')).toEqual(['ShowExtraData']);
    for (const path of ['/v3/REST/toplinkclicked/{id}', '/v3/REST/geostatistics/{country}']) {
      expect(names(path, 'query'), path).not.toContain('Limit');
      expect(names(path, 'path'), path).toHaveLength(1);
    }
  });

  it('gives an item form that reads no query only its path parameter', () => {
    expect(paths['/v3/REST/openinformation/{id}']?.get.parameters.map((p) => p.name)).toEqual(['id']);
    expect(paths['/v3/REST/messagestate/{id}']?.get.parameters.map((p) => p.name)).toEqual(['id']);
  });
});
