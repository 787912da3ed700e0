FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY bin ./bin
COPY src ./src
COPY projections ./projections
COPY tsconfig.json ./
USER node
EXPOSE 3000
ENTRYPOINT ["node", "--max-semi-space-size=32", "bin/mailtally.js"]
CMD ["serve"]
